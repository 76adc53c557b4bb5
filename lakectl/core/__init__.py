"""The core of lakectl: model, KV store, block store, version graph and porcelain verbs."""
