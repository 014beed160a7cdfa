"""The research area: import, campaign builder, annotator management, item browser and gold marking, for
researchers, outside the operators' admin."""
