"""The gang dialects yuniplace reads: one module per dialect, each implementing `base.GangDialect`, and
`registry`, the only module that knows them all (in the order they win when a pod speaks several)."""
