"""What slimwheel puts into built wheels to run them (the loader), and run-time queries of the driver (doctor,
footprint). loader.py is copied into wheels and must stay standard-library only."""
