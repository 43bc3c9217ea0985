"""Request sinks: chunking, wire protocols, the retry ladder and the HTTP sink that sends chunks."""
