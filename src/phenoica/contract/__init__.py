"""The screen contract: its column names and checks, the values several stages share, and the check of the whole screen at the door."""
