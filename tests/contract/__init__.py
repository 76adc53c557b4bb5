"""Contract tests: one suite per protocol, run against every implementation."""
