"""Generated protobuf stubs (dra/v1); see tests/fakes/node/proto/generate.py."""
