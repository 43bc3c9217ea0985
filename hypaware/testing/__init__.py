"""Helpers for testing hypaware and plugins written against it."""
