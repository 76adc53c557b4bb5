"""The REST API ``/api/v1``: lakeFS API v1 paths and JSON shapes, one router module per noun."""
