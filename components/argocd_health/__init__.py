"""Argo CD health checks (Lua) for LeaderWorkerSet and DisaggregatedSet, shipped as package data."""
