"""Pure decisions: when a source may be polled, what a response means for its state."""
