"""Dense text encoders: the protocol (base), torch, OpenVINO, OpenAI, multilingual-e5 (e5) and the loader by
name (load)."""
