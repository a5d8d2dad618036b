"""`kubectl gpu share`, `share off`, `share rollback` and `share show`: sharing rolled out.

Owns the I/O of a sharing change, one noun per module: `state` reads what the change is
planned from, `change` runs it in order (refusals, `drain`, `writes`, `restarts`, `capacity`),
`results` holds the rows it returns, `report` turns them into documents and diffs, `stop`
tells what an interrupted change left, `show` surveys the cluster without changing it; the
flags arrive as `options.Options`. Must not decide what to change (kubectl_gpu.sharing
does) nor render (the CLI does). `show` and `state` never write, so doctor may read through
them (an import-linter contract keeps it so). Nothing is imported here: each caller imports
the one module it needs, so a read never loads the writes.
"""
