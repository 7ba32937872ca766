"""Sphinx configuration of cowcheck's documentation site: the Markdown pages of docs/ (MyST) and the
API reference from the docstrings (autodoc). README.md ("Read more") has the command that builds it, with
warnings as errors; tests/test_docs_site.py runs the same build in CI."""

import cowcheck

project = "cowcheck"
author = "the cowcheck authors"
release = version = cowcheck.__version__
copyright = "cowcheck authors, Apache-2.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "findings/*.json"]
# GitHub's anchors for headings (the pages link each other by them, e.g. contract.md#p2)
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
html_theme = "furo"
html_title = f"cowcheck {release}"
html_static_path = []
