"""Policy evaluation on GPU cluster traces: the FGD paper's inflation protocol and a time-based replay."""
