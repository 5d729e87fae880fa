{%- extends 'course_base.tpl' -%}
{#- The grading page of a submission whose autograded notebook is gone (nbgrader's own 404 page imports a macro
    file that no longer exists). -#}
{%- set page = 'gradebook' -%}
{%- block title -%}
找不到这份提交的 notebook
{%- endblock -%}
{%- block body -%}
<ol class="breadcrumb">
  <li><a href="{{ resources.base_url }}/formgrader/gradebook">人工评分</a></li>
  <li><a href="{{ resources.base_url }}/formgrader/gradebook/{{ resources.assignment_id }}">{{ resources.assignment_id }}</a></li>
  <li class="active">{{ resources.notebook_id }}</li>
</ol>
<div class="alert alert-danger">评分后的 notebook 不在了：<code>{{ resources.filename }}</code>。
用 <code>course grade {{ resources.assignment_id }} --student {{ resources.student }}</code> 重新评分。</div>
{%- endblock -%}
