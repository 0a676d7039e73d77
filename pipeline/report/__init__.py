"""Tables (Markdown and LaTeX) and plots of the results table: `make report`."""
