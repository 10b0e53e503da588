"""cutegen.codegen.rewriters"""
