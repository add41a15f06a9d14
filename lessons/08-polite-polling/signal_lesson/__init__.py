"""Signal, built one lesson at a time: this package is the project at one step."""
