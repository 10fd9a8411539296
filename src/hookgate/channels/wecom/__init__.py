"""WeCom (企业微信): template_card button_interaction app messages and encrypted callbacks."""
