"""Generated protobuf stubs (root); see tests/kit/node/proto/generate.py."""
