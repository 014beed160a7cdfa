"""The judges' part of the research area: configs, launches, runs and the ways to compare and certify them."""
