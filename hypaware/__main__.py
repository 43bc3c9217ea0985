from hypaware.cli import run

run()
