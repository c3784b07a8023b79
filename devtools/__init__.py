"""Developer tools of the slimwheel repository (generators); not part of the installed package."""
