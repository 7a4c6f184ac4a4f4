"""The runner for the JSON cases of hostkit's Ansible modules (tests/module_cases/)."""
