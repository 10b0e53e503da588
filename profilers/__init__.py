"""cutegen.profilers"""
