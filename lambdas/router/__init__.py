"""Router Lambda: ingest events -> active spec partition -> the version's geo stream."""
