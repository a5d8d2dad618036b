"""Generated protobuf stubs (root); see tests/fakes/node/proto/generate.py."""
