"""The reservation controller: watches pods, reserves room with placeholders, swaps real pods in."""
