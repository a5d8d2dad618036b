"""Generated protobuf stubs (podresources/v1); see proto/generate.py. Never edit by hand."""
