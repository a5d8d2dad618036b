"""Generated protobuf stubs (root); see proto/generate.py. Never edit by hand."""
