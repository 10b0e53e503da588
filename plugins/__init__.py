"""cutegen.plugins"""
