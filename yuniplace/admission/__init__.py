"""Admission: which waiting application may reserve now, decided once per cycle over one snapshot of
the cluster's room and queues."""
