"""The workflow on top of the verbs: action files and their runs, hooks and webhooks, pull requests."""
