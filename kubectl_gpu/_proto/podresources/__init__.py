"""Generated protobuf stubs (podresources); see proto/generate.py. Never edit by hand."""
