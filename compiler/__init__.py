"""The planc driver: command line, pipelines, diagnostics and simulation."""
