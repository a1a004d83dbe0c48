"""DRA devices (resource.k8s.io/v1) as yuniplace reads them: what claims ask, CEL selectors, the
devices of every node."""
