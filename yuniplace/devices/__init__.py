"""DRA devices (resource.k8s.io/v1) as yuniplace reads them: claims and what they ask, CEL selectors, the devices of every node."""
