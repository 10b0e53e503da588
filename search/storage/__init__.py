"""cutegen.search.storage"""
