"""Measuring on this device (torch): runner, timing, environment, sensors, quality, sweep, soak."""
