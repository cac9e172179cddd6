"""The project's tests, one package per folder (mirroring unified/), so that test modules
are named by their path (tests.sandbox.test_executor) and helpers import as tests.helpers.*.
See tests/README.md."""
