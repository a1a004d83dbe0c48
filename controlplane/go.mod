// The module of the control-plane binary (main.go). Its dependencies are pinned once per supported
// Kubernetes minor version, in kubernetes/<minor>.mod and .sum; every build names one with -modfile
// (yuniplace/localcluster/build.py), so no requirement lives here.
module yuniplace.io/controlplane

go 1.26.0
