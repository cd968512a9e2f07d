"""The project's spiders: one generic spider, ``site``."""
