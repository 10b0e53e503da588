"""cutegen.search"""
