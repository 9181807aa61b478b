"""SST format: blocks, filters, builder and reader; see docs/format.md."""
