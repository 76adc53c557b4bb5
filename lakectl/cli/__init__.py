"""The lakectl command line: typer sub-apps per noun, one function per verb, over a Backend."""
