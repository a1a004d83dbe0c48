"""The admission webhook: gates gang pods at creation, and turns away invalid gang annotations."""
