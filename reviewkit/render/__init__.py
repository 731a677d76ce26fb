"""Review packets: charts, the packet view model, HTML and PDF."""
