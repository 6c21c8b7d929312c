"""The suite's conftest: it only loads the oota plugin (oota_suite.py) for the whole session.

A conftest's fixtures and hooks reach only the tests in its folder; the vendor's tests live
beside this suite (/opt/oota/vendor-verify), so the plugin is registered globally instead.
"""

pytest_plugins = ["oota_suite"]
