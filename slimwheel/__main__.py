from slimwheel.cli import entry

entry()
