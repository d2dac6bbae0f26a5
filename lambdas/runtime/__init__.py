"""What every Lambda function runs on: its config from the environment, its AWS clients and the adapters over them
(control and lease tables, geo streams, buckets, ECS), the control-table records, metrics, pacing and the errors.

(Named ``common`` until 2026-12-07: a folder name that says nothing of what is in it.)
"""
