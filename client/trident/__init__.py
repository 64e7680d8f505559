"""Trident: transactional batches with exactly-once state (Storm's org.apache.storm.trident)."""
