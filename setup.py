# This file exists only for scrapyd-deploy, which builds an egg with `setup.py bdist_egg`.
# The project's metadata lives in pyproject.toml; keep the entry point in sync with it.
from setuptools import find_packages, setup

setup(
    name="spidersite",
    version="0.1.0",
    packages=find_packages(include=["spidersite*", "search*"]),
    include_package_data=True,
    package_data={
        "search": [
            "migrations/*.py",
            "migrations/*.mako",
            "migrations/versions/*.py",
            "web/templates/*",
            "web/static/*",
        ]
    },
    entry_points={"scrapy": ["settings = spidersite.settings"]},
)
